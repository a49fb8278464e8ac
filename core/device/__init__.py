"""The device: a Handle on one OpenCL device, its kernel cache, timing with profiling events and tensors on it."""
