#!/usr/bin/env python3
"""Which kept OpenCL object makes NVIDIA's OpenCL crash when it is released (RELIABILITY.md).

Runs pytest on the given paths; when the session finishes, every live Handle's programs, then
invokers, then scratch are released one at a time, each named on stdout first (flushed), so a
crash's last line names the object.  ``--finish`` waits for each handle's queue first.

    python3 -X faulthandler scripts/gpu_release_probe.py [--finish] PATH ...
    (on the GPU: scripts/bench_gpu.sh exec)
"""
import gc
import sys

import pytest


class ReleaseOneByOne:
    def __init__(self, finish):
        self.finish, self.kept = finish, []

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef):   # keep the session's handles to the end
        result = yield
        if fixturedef.argname == "convsolve_session_handle":
            self.kept.append(result)
        return result

    def pytest_sessionfinish(self):
        from convsolve.device import handle as handles
        for handle in {id(h): h for h in [*self.kept, *handles._live]}.values():
            print(f"\nhandle {handle!r}: {len(handle._programs)} programs, "
                  f"{len(handle._invokers)} invokers", flush=True)
            if self.finish:
                handle.queue.finish()
                print("queue finished", flush=True)
            for kind, table in (("program", handle._programs), ("invoker", handle._invokers)):
                for key in list(table):
                    print(f"release {kind} {key}", flush=True)
                    del table[key]
                    gc.collect()
            handle._plans.clear()
            print("release scratch", flush=True)
            handle._scratch = None
            gc.collect()
        print("all released", flush=True)


if __name__ == "__main__":
    finish = "--finish" in sys.argv
    paths = [a for a in sys.argv[1:] if a != "--finish"]
    sys.exit(pytest.main(["-q", "-p", "no:randomly", *paths], plugins=[ReleaseOneByOne(finish)]))
