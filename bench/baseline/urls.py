from django.urls import path

from bench.baseline import views

urlpatterns = [path("send", views.send)]
