"""`convsolve heuristics`: collect timings for the solver ranking, fit it, and evaluate it."""
import hashlib
import json
import os
import random
import sys

from .. import tuning
from ..bench import collect as collecting
from ..bench.corpus import corpus
from ..db.find_db import FindDb
from ..device.handle import Handle
from ..engine.solutions import wti_times
from ..errors import ValidationError
from ..heuristics import gbdt, ranking
from ..heuristics.data import Dataset, Record, read_dataset
from ..heuristics.evaluate import evaluate, refit, score
from ..heuristics.features import DeviceFacts
from ..heuristics.model import RankingModel
from ..problem import Direction, Problem
from ..scale import connect
from ..solvers.registry import registry
from ..text import print_table
from .worker import add_cluster_flags


def _int_list(field, text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise ValidationError(field, text, "expected a comma list of positive integers")
    return values


def _directions(text):
    if text == "all":
        return list(Direction)
    return [Direction.parse(d) for d in text.split(",")]


def cmd_collect(args):
    handle = Handle(args.device)
    names = [n.strip() for n in args.corpus.split(",")]
    unknown = sorted(set(names) - {"networks", "sweep"})
    if unknown:
        raise ValidationError("--corpus", args.corpus, "expected networks, sweep or both")
    max_gflop = args.max_gflop or (200.0 if handle.is_gpu else 2.0)
    problems = corpus(names, _int_list("--batches", args.batches), _directions(args.directions),
                      args.sweep, args.seed, max_gflop)
    random.Random(args.seed).shuffle(problems)   # a run cut short still covers every kind
    executor = connect(args.cluster, args.device, args.compile_workers)
    try:
        summary = collecting.collect(executor, handle, problems, args.out, args.repeat,
                                     args.include_naive, " ".join(sys.argv), args.time_limit_s,
                                     args.quiet)
    finally:
        executor.close()
    return 1 if summary is not None and summary.failed else 0


#: How --data treats a problem that several files time (repeat collections of one corpus).
MERGED = "; a problem in several is one record, each solver's time their geometric mean"


def add_parser(subparsers):
    """Register ``heuristics`` and its actions on an argparse ``subparsers`` object."""
    parser = subparsers.add_parser("heuristics", help="the learned solver ranking: collect, fit, "
                                   "eval", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True)
    collect = actions.add_parser("collect", help="time every applicable solver of a corpus "
                                 "(medians of interleaved rounds) into a JSON-lines file")
    flag = collect.add_argument
    flag("--out", required=True, help="the record file (appended to; a rerun resumes)")
    flag("--corpus", default="networks,sweep", help="networks, sweep or both (both)")
    flag("--batches", default="1,8,32", help="the networks' batches (1,8,32)")
    flag("--directions", default="all", help="comma list of fwd, bwd, wrw, or all (all)")
    flag("--sweep", type=int, default=300, help="random geometries in the sweep (300)")
    flag("--seed", type=int, default=0, help="the sweep's and the order's seed (0)")
    flag("--max-gflop", type=float, default=None,
         help="leave out larger problems (200 on a GPU, 2 on other devices)")
    flag("--repeat", type=int, default=5, help=f"timed rounds at most (5; at least "
         f"{collecting.MIN_ROUNDS} unless over {collecting.CUTOFF_FACTOR:g}x the best)")
    flag("--include-naive", action="store_true", help="time the naive reference solvers too")
    flag("--time-limit-s", type=float, default=None, help="stop after this long (resumable)")
    flag("--device", help="device index or substring (CONVSOLVE_DEVICE)")
    add_cluster_flags(collect)
    flag("--quiet", action="store_true", help="no progress bar")
    collect.set_defaults(func=cmd_collect)
    fit = actions.add_parser("fit", help="fit a model on record files, or (without --data) "
                             "refit this device's model on the user find-db and install it "
                             "when it does no worse on held-out problems")
    fit.add_argument("--data", nargs="+", help=f"record files of one device (collect's){MERGED}")
    fit.add_argument("--out", help="save the model here (gzip JSON)")
    fit.add_argument("--install", action="store_true",
                     help="make it this device's model (in the user's data folder)")
    fit.set_defaults(func=cmd_fit)
    evaluate_ = actions.add_parser("eval", help="accuracy of a model fitted on record files, "
                                   "cross-validated by geometry (or of --model as it is), beside "
                                   "the WTI ranking")
    evaluate_.add_argument("--data", nargs="+", required=True,
                           help=f"record files of one device{MERGED}")
    evaluate_.add_argument("--folds", type=int, default=5, help="folds (5)")
    evaluate_.add_argument("--model", help="score this model file as it is (no refit)")
    evaluate_.add_argument("--json", action="store_true", help="the report as JSON")
    evaluate_.set_defaults(func=cmd_eval)
    for action in (fit, evaluate_):
        action.add_argument("--rounds", type=int, default=gbdt.DEFAULT_PARAMS.rounds,
                            help=f"trees per ensemble of a fit on --data "
                            f"({gbdt.DEFAULT_PARAMS.rounds}; a large corpus may rank better with "
                            "more, each tree adding to the model's file and to a prediction's time)")


def find_db_dataset(handle):
    """The user find-db's timed records of this device as a Dataset: bare 2-D NCHW problems
    only (no epilogue, no policy suffix, no unfused variant: what the model learns), each with
    its solvers' times."""
    times = {}
    for row in FindDb().rows():
        if row["device"] != handle.db_key or row["failure"] or "/" in row["solver"]:
            continue
        try:
            problem = Problem.from_key(row["problem"])
        except ValidationError:   # a policy's or an epilogue's key
            continue
        if problem.epilogue is None and problem.is_2d_nchw:
            times.setdefault(problem, {})[row["solver"]] = row["time_ms"]
    return Dataset(DeviceFacts.from_cl(handle.device),
                   tuple(Record(p, t) for p, t in times.items() if len(t) > 1))


def _wti_baseline(problem):
    """The old ranking, for eval: immediate mode's WTI fallback over the installed solvers."""
    return {s.name: t for s, t in wti_times(registry().candidates(problem)[0], problem).items()}


def _datasets(paths):
    """The record files of one device as one dataset, a problem's repeat records merged."""
    sets = [read_dataset(path) for path in paths]
    if len({s.device for s in sets}) > 1:
        raise ValidationError("--data", " ".join(paths), "records of more than one device")
    return Dataset(sets[0].device, tuple(r for s in sets for r in s.records),
                   sets[0].header).merged()


def _install(model, handle, path):
    """Put the model in the user's folder for this device's exact key (ranking's first)."""
    folder = ranking.user_dir()
    folder.mkdir(parents=True, exist_ok=True)
    key = tuning.device_keys(handle.device)[0]
    file = hashlib.sha256(key.encode()).hexdigest()[:16] + ".json.gz"
    model.save(folder / file)
    index = folder / "index.json"
    entries = json.loads(index.read_text()) if index.exists() else {}
    entries[key] = file
    temporary = index.with_suffix(".tmp")
    temporary.write_text(json.dumps(entries, indent=1))
    os.replace(temporary, index)
    ranking.forget()
    print(f"installed for {key!r}: {folder / file}")


def cmd_fit(args):
    handle = Handle()
    if args.data:
        model = RankingModel.fit(_datasets(args.data), gbdt.Params(rounds=args.rounds))
        print(f"fitted on {model.training['records']} records")
    else:   # a refit of the model in use on the user's find-db
        chosen = ranking.model_for(handle.device)
        if chosen is None:
            raise ValidationError("--data", None, "no model for this device to refit: give "
                                  "--data files")
        data = find_db_dataset(handle)
        if len(data) < 20:
            raise ValidationError("find-db", len(data), "too few problems with two or more "
                                  "timed solvers to refit on (20 needed)")
        model, report, kept = refit(chosen[0], data)
        print(f"refit on {report.train_records} problems, held out {report.held_out_records}: "
              f"within 10% {report.shipped.within10:.1%} -> {report.refit.within10:.1%}: "
              f"{'kept' if kept else 'not kept (no better)'}")
        if not kept:
            return 0
    if args.out:
        model.save(args.out)
        print(f"saved {args.out}")
    if args.install or not args.data:
        _install(model, handle, args.out)
    return 0


def cmd_eval(args):
    data = _datasets(args.data)
    report = (score(RankingModel.load(args.model), data, _wti_baseline) if args.model
              else evaluate(data, args.folds, _wti_baseline, gbdt.Params(rounds=args.rounds)))
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
        return 0
    rows = []
    for label, part in (("model", report.model), ("WTI", report.baseline)):
        for group, scores in [("all", part.overall), *part.direction.items(),
                              *part.family.items()]:
            rows.append([label, group, scores.problems, f"{scores.within10:.1%}",
                         f"{scores.within25:.1%}", f"{scores.top2:.1%}",
                         "-" if scores.auto is None else
                         f"{scores.auto:.1%} ({scores.auto_mean_count:.2f})",
                         f"{scores.mean_regret:.3f}", f"{scores.max_regret:.2f}"])
    print(f"{len(data)} problems, " + (f"the model {args.model} (no refit)" if args.model
                                        else f"{args.folds} folds grouped by geometry"))
    print_table(rows, ["ranking", "group", "problems", "within 10%", "within 25%", "top 2",
                       "auto (mean timed)", "mean regret", "max regret"])
    return 0
