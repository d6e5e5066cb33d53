"""``jax.monitoring``: listeners for named events, durations, time spans and scalars.

Programs (and libraries) record events; registered listeners receive them with their keyword
metadata. jaxkit itself records none of JAX's internal events."""
from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "clear_event_listeners", "record_event", "record_event_duration_secs",
    "record_event_time_span", "record_scalar", "register_event_duration_secs_listener",
    "register_event_listener", "register_event_time_span_listener", "register_scalar_listener",
    "unregister_event_duration_listener", "unregister_event_listener",
    "unregister_event_time_span_listener", "unregister_scalar_listener",
]

_event: list[Callable] = []
_duration: list[Callable] = []
_time_span: list[Callable] = []
_scalar: list[Callable] = []


def record_event(event: str, **kwargs: str | int) -> None:
    for callback in list(_event):
        callback(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs: str | int) -> None:
    for callback in list(_duration):
        callback(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float,
                           **kwargs: str | int) -> None:
    for callback in list(_time_span):
        callback(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value: float | int, **kwargs: str | int) -> None:
    for callback in list(_scalar):
        callback(event, value, **kwargs)


def register_event_listener(callback: Callable) -> None:
    _event.append(callback)


def register_event_duration_secs_listener(callback: Callable) -> None:
    _duration.append(callback)


def register_event_time_span_listener(callback: Callable) -> None:
    _time_span.append(callback)


def register_scalar_listener(callback: Callable) -> None:
    _scalar.append(callback)


def _unregister(listeners: list[Callable], callback: Callable, what: str) -> None:
    if callback not in listeners:
        raise AssertionError(f"{what} listener {callback} is not registered")
    listeners.remove(callback)


def unregister_event_listener(callback: Callable) -> None:
    _unregister(_event, callback, "Event")


def unregister_event_duration_listener(callback: Callable) -> None:
    _unregister(_duration, callback, "Event duration")


def unregister_event_time_span_listener(callback: Callable) -> None:
    _unregister(_time_span, callback, "Event time span")


def unregister_scalar_listener(callback: Callable) -> None:
    _unregister(_scalar, callback, "Scalar")


def clear_event_listeners() -> None:
    for listeners in (_event, _duration, _time_span, _scalar):
        listeners.clear()
