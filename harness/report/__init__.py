"""The run report: ``report.html`` beside ``results.json``, one self-contained page.

What it shows, from the run directory alone (history, results, node logs):

- the verdict and each checker's result;
- every anomaly class with its examples; each history index in an example
  links to that operation in the operation table of the page;
- plots (matplotlib, PNG embedded as data URIs): latency over time (points
  coloured ok / fail / info), latency quantiles per window, throughput over
  time, availability per window, and per node what a fault package sets
  (its ``series``: the clock offsets the clock nemesis applied);
  fault intervals are shaded on every time plot, one colour per fault kind;
- for a key that is not linearizable, its counterexample drawn as
  Porcupine draws one: processes as rows, each operation a bar from its
  call to its return, the longest linearizable prefix numbered in
  linearization order, the operation that cannot be placed after it in
  red, and the operations concurrent with it in grey;
- every planned fault step, whether it happened (and on which nodes) or was
  skipped (and why), and the gates that kept a vacuous run from reading valid;
- each example of a queue anomaly in one plain sentence (what was sent,
  acknowledged, read, lost, with the times of the operations) above its JSON;
- node log lines around each anomaly's operations, each line shown once (the
  node logs carry wall clock times; ``history-start.json`` ties them to the
  history's time axis), and every traceback found in a node log.

The history is streamed, never held whole (``harness.frames``): the scatter
plot shows a uniform sample of at most ``MAX_POINTS`` operations; windows,
rates and quantiles use every operation, the quantiles read from a
per-window latency histogram (bins 2.3 % wide); a run longer than
``MAX_WINDOWS`` windows gets wider windows.
"""
from __future__ import annotations

from .examples import plain
from .page import render
from .series import ANSWERED_FAILS, FAULT_COLOURS, OPENS, Series, fault_intervals, operations

__all__ = ["ANSWERED_FAILS", "FAULT_COLOURS", "OPENS", "Series", "fault_intervals", "operations",
           "plain", "render"]
