"""Sign-in for operators and tenant members (the admin's login admits staff only): the login and
logout pages, mounted at /accounts/ by scheduler_project/urls.py."""

from django.contrib.auth.views import LoginView, LogoutView
from django.urls import path


class OperatorLoginView(LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True
    next_page = "dashboard:overview"  # a URL name: the view resolves it


class OperatorLogoutView(LogoutView):
    next_page = "login"


urlpatterns = [
    path("login/", OperatorLoginView.as_view(), name="login"),
    path("logout/", OperatorLogoutView.as_view(), name="logout"),
]
