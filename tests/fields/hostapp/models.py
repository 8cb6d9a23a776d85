"""Models of a host project, each with a statechart field."""

from __future__ import annotations

from django.db import models

from statecharts.fields import StatechartField


class Customer(models.Model):
    name = models.CharField(max_length=100)


class Order(models.Model):
    """Started on its first save; deleting it cancels its execution."""

    number = models.CharField(max_length=20)
    total = models.IntegerField(default=0)
    customer = models.ForeignKey(Customer, null=True, blank=True, on_delete=models.CASCADE)
    flow = StatechartField("order", data=lambda order: {"total": order.total})

    def __str__(self) -> str:
        return f"order {self.number}"


class Ticket(models.Model):
    """Started the first time ``ticket.flow`` is read; refused a delete while it is live."""

    title = models.CharField(max_length=100)
    customer = models.ForeignKey(Customer, null=True, blank=True, on_delete=models.CASCADE)
    flow = StatechartField("order", start="lazy", on_instance_delete="protect")

    def __str__(self) -> str:
        return f"ticket {self.title}"


