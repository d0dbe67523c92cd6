"""Fixtures for the dashboard: signed-in clients for staff and for tenant members."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2's deliberate slowness costs a second a user; these tests are not about it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def make_user(db):
    def make(username: str, *, staff: bool = False, tenants=()):
        user = get_user_model().objects.create_user(username=username, password=PASSWORD, is_staff=staff)
        for tenant in tenants:
            tenant.members.add(user)
        return user

    return make


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def staff(make_user):
    return make_user("olivia", staff=True)


@pytest.fixture
def member(make_user, tenant):
    """A member of tenant `acme` only."""
    return make_user("ada", tenants=[tenant])


@pytest.fixture
def staff_client(staff) -> Client:
    return _client(staff)


@pytest.fixture
def member_client(member) -> Client:
    return _client(member)
