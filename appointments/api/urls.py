from django.urls import path

from appointments.api.views import SlotListView

urlpatterns = [
    path("appointments/slots", SlotListView.as_view(), name="appointment-slots"),
]
