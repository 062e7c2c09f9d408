"""Writes on lab orders and results (CONTRACT section 14)."""

from __future__ import annotations
