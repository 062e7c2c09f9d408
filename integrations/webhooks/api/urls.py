from clinic.api.viewsets import ClinicRouter
from integrations.webhooks.api.viewsets import WebhookSubscriptionViewSet

router = ClinicRouter()
# webhook-subscription-list, -detail, -test, -rotate-secret
router.register("webhooks/subscriptions", WebhookSubscriptionViewSet, basename="webhook-subscription")

urlpatterns = router.urls
