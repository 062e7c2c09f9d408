"""Reads of the lab catalogue and orders, always through the calling client's branch restriction."""

from __future__ import annotations
