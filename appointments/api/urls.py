from django.urls import path

from appointments.api.views import AppointmentCreateView, AppointmentDetailView, SlotListView

urlpatterns = [
    path("appointments", AppointmentCreateView.as_view(), name="appointment-list"),
    path("appointments/slots", SlotListView.as_view(), name="appointment-slots"),
    path("appointments/<str:id>", AppointmentDetailView.as_view(), name="appointment-detail"),
]
