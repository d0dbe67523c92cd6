from django.contrib import admin, messages

from tenants.models import ApiToken, Tenant
from tenants.services import token_create


class ApiTokenInline(admin.TabularInline):
    model = ApiToken
    extra = 0
    fields = ["name", "key_prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["key_prefix", "created_at", "last_used_at"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "weight", "max_concurrent_executions", "max_active_jobs", "submit_rate_per_minute"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["members"]
    exclude = ["signing_secret"]
    inlines = [ApiTokenInline]
    actions = ["issue_token"]

    # Minting a token grants the tenant's API access, so it takes the change permission, not view.
    @admin.action(description="Issue a new API token (shown once)", permissions=["change"])
    def issue_token(self, request, queryset):
        for tenant in queryset:
            _, raw = token_create(tenant=tenant, name=f"admin:{request.user}")
            self.message_user(
                request, f"token for {tenant.slug}: {raw} (copy it now; it is not stored)", messages.WARNING
            )


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["key_prefix", "tenant", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant"]
    # A token stays with the tenant it was issued to; revoking is the one change that matters.
    readonly_fields = ["tenant", "key_prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request) -> bool:
        return False  # tokens are issued by the tenant action, which can show the raw value once
