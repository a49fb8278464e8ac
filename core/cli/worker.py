"""`convsolve worker`: Dask workers for a scheduler; the --cluster flags of the commands that
run jobs through one (tune, conv --file, heuristics collect)."""
from ..scale import executor
from ..scale.workers import serve


def cmd_worker(args):
    executor.need_dask("--scheduler", args.scheduler)
    serve(args.scheduler, args.device, args.compile_workers or 0)
    return 0


def add_cluster_flags(parser):
    """--cluster and --compile-workers, on a command whose jobs an executor runs."""
    parser.add_argument("--cluster", metavar="ADDR|FILE|local",
                        help="run the jobs on a Dask cluster: a scheduler's address, a scheduler "
                        "file, or local (a timing worker on --device and compile workers on "
                        "this host's cores); needs convsolve[dask]")
    parser.add_argument("--compile-workers", type=int, metavar="N",
                        help="with --cluster local: workers that build kernels ahead of the "
                        "timing worker (on PoCL, that run whole jobs too; default: one per core)")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "worker", help="Dask workers on this host for a scheduler: one timing worker on a "
        "device, and compile workers", description=__doc__.splitlines()[0])
    parser.add_argument("--scheduler", required=True, metavar="ADDR|FILE",
                        help="the scheduler's address (tcp://host:8786) or its scheduler file")
    parser.add_argument("--device", help="the device to time on: index or substring "
                        "(CONVSOLVE_DEVICE; unset: the default device)")
    parser.add_argument("--compile-workers", type=int, metavar="N", default=0,
                        help="workers that build for the timing worker (on PoCL, whole jobs) (0)")
    parser.set_defaults(func=cmd_worker)
