"""How the bearer token appears in the OpenAPI schema. web/schema.py imports it, so it registers
with drf-spectacular wherever the API's views are loaded, and only there: it imports
drf-spectacular's plumbing (and with it django.test), 80 ms that no other role needs."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "web.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A tenant's API token (`manage.py create_token SLUG`): `Authorization: Bearer <token>`.",
        }
