"""The clients the hostile tests knock on the doors with: the API and the admin, each as a
superuser (so what a door refuses is the input, never the caller)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("admin", password="pw"))
    return client
