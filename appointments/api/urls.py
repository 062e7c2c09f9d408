from django.urls import path

from appointments.api import views

urlpatterns = [
    path("appointments", views.AppointmentListCreateView.as_view(), name="appointment-list"),
    path("appointments/slots", views.SlotListView.as_view(), name="appointment-slots"),
    path("appointments/<str:id>", views.AppointmentDetailView.as_view(), name="appointment-detail"),
    path("appointments/<str:id>/reschedule", views.AppointmentRescheduleView.as_view(), name="appointment-reschedule"),
    path("appointments/<str:id>/check-in", views.AppointmentCheckInView.as_view(), name="appointment-check-in"),
    path("appointments/<str:id>/complete", views.AppointmentCompleteView.as_view(), name="appointment-complete"),
    path("appointments/<str:id>/no-show", views.AppointmentNoShowView.as_view(), name="appointment-no-show"),
]
