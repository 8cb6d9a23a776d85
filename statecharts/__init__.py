"""Durable W3C SCXML statecharts for Django."""
