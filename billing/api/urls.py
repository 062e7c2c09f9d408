from django.urls import path

from billing.api import views

urlpatterns = [
    path("billing/invoices", views.InvoiceListCreateView.as_view(), name="invoice-list"),
    path("billing/invoices/<str:id>", views.InvoiceDetailView.as_view(), name="invoice-detail"),
    path("billing/invoices/<str:id>/finalize", views.InvoiceFinalizeView.as_view(), name="invoice-finalize"),
    path("billing/invoices/<str:id>/cancel", views.InvoiceCancelView.as_view(), name="invoice-cancel"),
    path("billing/invoices/<str:id>/payments", views.PaymentCreateView.as_view(), name="invoice-payments"),
    path("billing/summary", views.SummaryView.as_view(), name="billing-summary"),
]
