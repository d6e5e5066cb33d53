"""``jax.profiler``: traces for TensorBoard/XProf, trace annotations and device memory
profiles (see ``jaxkit.runtime.profiling``)."""
from jaxkit.runtime.profiling import (ProfileData, ProfileEvent, ProfileOptions, ProfilePlane,
                                      StepTraceAnnotation, TraceAnnotation, annotate_function,
                                      device_memory_profile, register_subprocess,
                                      save_device_memory_profile, start_server, start_trace,
                                      stop_server, stop_trace, trace)

__all__ = [
    "ProfileData", "ProfileEvent", "ProfileOptions", "ProfilePlane", "StepTraceAnnotation",
    "TraceAnnotation", "annotate_function", "device_memory_profile", "register_subprocess",
    "save_device_memory_profile", "start_server", "start_trace", "stop_server", "stop_trace",
    "trace",
]
