"""The commands that run or read campaigns: ``run``, ``campaign``, ``reproduce``, ``matrix``,
``analyze`` and ``serve``."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from core.verdict import EXIT_USAGE, exit_code
from node_image.bugs import BUGS


def cmd_run(args) -> int:
    from ..config import load_campaign, resolve
    from ..runner import run
    campaign = load_campaign(args.campaign) if args.campaign else {}
    overrides = {
        "seed": args.seed, "time_limit_s": args.time_limit, "nodes": args.nodes,
        "controllers": args.controllers, "concurrency": args.concurrency, "rate": args.rate,
        "nemesis": None if args.nemesis is None else [p for p in args.nemesis.split(",") if p],
        "bugs": args.bug or None, "backend": args.backend, "engine": args.engine,
        "spark_master": args.spark_master, "test": args.test, "results_dir": args.results_dir,
        "workload": args.workload,
    }
    if args.hosts:
        from ..hosts import read_hosts_arg
        overrides.update(read_hosts_arg(args.hosts))
        overrides["backend"] = args.backend or "ssh"
    cfg = resolve(campaign, overrides)
    return run(cfg)


def cmd_campaign(args) -> int:
    """Validate the matrix, build the images once, then let pytest run the cells."""
    import pytest

    from ..campaign_matrix import load_matrix
    from ..images import build_images
    matrix = load_matrix(args.file)  # a bad file fails here, before any container
    if args.n > 1 and any(c.config.hosts for c in matrix.cells):
        print(f"chaoskraft campaign: {matrix.path}: its cells run on hosts over SSH, one node "
              f"per host on fixed ports, so one cell at a time: leave out -n", file=sys.stderr)
        return EXIT_USAGE
    results = Path(args.results_dir or matrix.cells[0].config.results_dir) / matrix.name
    results.mkdir(parents=True, exist_ok=True)
    junit = Path(args.junit_xml) if args.junit_xml else results / "junit.xml"
    print(f"campaign {matrix.path}: {len(matrix.cells)} cells "
          f"({', '.join(c.id for c in matrix.cells)}); runs in {results}", flush=True)
    build_images(log=print)
    # pytest names cells after the file relative to where it runs: run it beside the file
    results, junit, here = results.resolve(), junit.resolve(), Path.cwd()
    argv = [matrix.path.name, "-p", "harness.pytest_campaign", "-p", "no:cacheprovider",
            "-p", "no:warnings", "--chaoskraft-results", str(results),
            "--chaoskraft-name", matrix.name, f"--junitxml={junit}",
            "-o", f"junit_suite_name={matrix.name}", "-o", "junit_family=xunit2",
            "-v", "--no-header", "-rf", "--rootdir", "."]
    if args.n and args.n > 1:
        argv += ["-n", str(args.n), "--dist", "load"]
    os.chdir(matrix.path.resolve().parent)
    try:
        code = pytest.main(argv)
    finally:
        os.chdir(here)
    print(f"JUnit XML: {junit}")
    if code == pytest.ExitCode.INTERRUPTED:  # a cell's run was interrupted: so is the campaign
        raise KeyboardInterrupt
    return int(code)


def cmd_serve(args) -> int:
    from ..serve import serve
    return serve(args.results_dir, args.host, args.port)


def cmd_reproduce(args) -> int:
    from ..reproduce import reproduce
    if args.attempts < 1:
        print("chaoskraft reproduce: --attempts must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    return reproduce(Path(args.run_dir), args.attempts, args.results_dir)


def cmd_matrix(args) -> int:
    from ..bug_matrix import bug_groups, expected_detection, run_matrix
    groups = bug_groups()
    bugs: list[str | None] = []
    for name in (b.strip() for b in args.bugs.split(",") if b.strip()):
        if name not in groups and name not in BUGS:
            print(f"chaoskraft matrix: unknown bug {name!r}; known: {', '.join(groups)}, "
                  f"{', '.join(sorted(BUGS))}", file=sys.stderr)
            return EXIT_USAGE
        bugs += [b for b in groups.get(name, [name]) if b not in bugs]
    if args.jobs < 1:
        print(f"chaoskraft matrix: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return EXIT_USAGE
    without = tuple(w.strip() for w in (args.without or "").split(",") if w.strip())
    try:
        cells = run_matrix(bugs, list(args.seeds), args.time_limit, args.sim_duration_s,
                           args.results_dir, jobs=args.jobs, campaign=args.campaign,
                           without=without)
    except ValueError as exc:
        print(f"chaoskraft matrix: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # Exit 0 only if every bug was caught in every seed where it must be (not where a package
    # it needs was taken away) and the correct node never flagged.
    ok = all(c.detected == expected_detection(None if c.bug == "none" else c.bug, without)
             and not c.verdict.startswith("error") for c in cells)
    return 0 if ok else 1


def cmd_analyze(args) -> int:
    from ..analyze import analyze
    if args.across:
        from ..across import across
        unreadable: list[str] = []
        across(args.across, spark_master=args.spark_master, unreadable=unreadable)
        return 3 if unreadable else 0  # the summary leaves out runs it could not read
    if not args.run_dir:
        print("chaoskraft analyze: give a RUN_DIR, or --across DIR", file=sys.stderr)
        return EXIT_USAGE
    results = analyze(args.run_dir, engine=args.engine, spark_master=args.spark_master,
                      budget_s=args.budget_s)
    print(f"verdict: {results['verdict']}")
    return exit_code(results["valid"])
