"""Sign-in for operators and tenant members (the admin's login admits staff only)."""

from django.urls import path

from dashboard import views

urlpatterns = [
    path("login/", views.OperatorLoginView.as_view(), name="login"),
    path("logout/", views.OperatorLogoutView.as_view(), name="logout"),
]
