"""How the bearer token appears in the OpenAPI schema (loaded by TenantsConfig.ready)."""

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
