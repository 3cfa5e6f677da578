#!/usr/bin/env python3
"""plot_bench.py - turns r35a_bench --json output into a PNG: % of roofline and GB/s against context.

    build/bench/r35a_bench --head-size 64  --json > d64.json
    build/bench/r35a_bench --head-size 128 --json > d128.json
    lab/plot_bench.py -o bench.png d64.json d128.json

One line per head size (and per dtype, op, M, ... when the inputs differ in those; a preset's rows
carry their own shape, so `r35a_bench --preset h200-decode --json` gives one line per D, heads, M
and batch), x = the context length of the paged rows, log scale (for encoder rows: their segment
lists). The upper panel is % of the
roofline, the lower one GB/s with the peak bandwidth the bench used. The title names the machine
(CPU, backend, arch) and the library version, as the bench recorded them. Each input may hold one
JSON object, several concatenated ones, or a list of them; "-" reads stdin.

Needs matplotlib (Debian: apt-get install python3-matplotlib). Without it the script prints that
it skipped the plot and exits 0, so scripts and CI that call it keep going.
"""
import argparse
import importlib.util
import json
import sys

MAX_LEGEND = 90
SKIP_MESSAGE = "plot_bench: matplotlib is not installed (Debian: apt-get install python3-matplotlib); plot skipped"

# Problem fields that tell series apart, in label order, with how they are shown.
_SERIES_FIELDS = (("op", "{}"), ("dtype", "{}"), ("head_size", "D={}"), ("num_q_heads", "Hq={}"),
                  ("num_kv_heads", "Hkv={}"), ("page_size", "page {}"), ("batch", "batch {}"),
                  ("query_len", "M={}"), ("window", "window {}"), ("causal", "causal={}"),
                  ("backend", "{}"))


def read_runs(paths):
    """Every bench JSON object in the given files ("-" = stdin)."""
    runs = []
    decoder = json.JSONDecoder()
    for path in paths:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        pos = 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
            try:
                value, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as error:
                raise SystemExit("plot_bench: %s: not bench JSON: %s" % (path, error))
            for run in value if isinstance(value, list) else [value]:
                if not isinstance(run, dict) or "rows" not in run or "problem" not in run:
                    raise SystemExit("plot_bench: %s: an object without 'problem' and 'rows' (use r35a_bench --json)"
                                     % path)
                runs.append(run)
    if not runs:
        raise SystemExit("plot_bench: no bench runs in the input")
    return runs


def select_rows(runs, conditions):
    """Keeps the rows whose shape (row fields over the run's problem) matches every FIELD=VALUE."""
    wanted = []
    for text in conditions:
        name, sep, value = text.partition("=")
        if not sep or name not in dict(_SERIES_FIELDS):
            raise SystemExit("plot_bench: --where %s: expected FIELD=VALUE with FIELD one of %s"
                             % (text, ", ".join(n for n, _ in _SERIES_FIELDS)))
        wanted.append((name, value))
    if not wanted:
        return runs
    kept = []
    for run in runs:
        rows = [row for row in run["rows"]
                if all(str(dict(series_key(run, row)).get(name)) == value for name, value in wanted)]
        if rows:
            kept.append(dict(run, rows=rows))
    if not kept:
        raise SystemExit("plot_bench: no row matches --where %s" % " ".join(conditions))
    return kept


def series_key(run, row=None):
    """The run's problem fields, overridden by the row's own shape fields where it has them (rows of
    a preset differ in D, heads, M, ...; older bench JSON rows carry only the context)."""
    problem = dict(run["problem"])
    problem["backend"] = run.get("machine", {}).get("backend")
    for name, _ in _SERIES_FIELDS:
        if row is not None and name in row and name != "backend":
            problem[name] = row[name]
    return tuple((name, problem.get(name)) for name, _ in _SERIES_FIELDS)


def label_for(key, varying):
    """Head size always; the other fields only where the inputs differ in them."""
    shown = dict(key)
    parts = [fmt.format(shown[name]) for name, fmt in _SERIES_FIELDS
             if (name == "head_size" or name in varying) and shown.get(name) is not None]
    return ", ".join(parts)


def collect(runs):
    """{series key: [(x, roofline %, GB/s, implementation)]}, the x axis name and, for encoder rows
    (whose sizes are segment lists, not one number), the category labels that x indexes."""
    series, categories = {}, []
    for run in runs:
        for row in run["rows"]:
            points = series.setdefault(series_key(run, row), [])
            if "context" in row:
                x = row["context"]
            else:
                label = "%s (%s tokens)" % (row.get("segments", "?"), row.get("tokens", "?"))
                if label not in categories:
                    categories.append(label)
                x = categories.index(label)
            points.append((x, row.get("roofline_pct"), row.get("gbs"), row.get("implementation", "")))
    for points in series.values():
        points.sort(key=lambda p: p[0])
    x_name = "segment lengths per call" if categories else "context (tokens)"
    return {k: v for k, v in series.items() if v}, x_name, categories


def title_for(runs):
    machines = []
    for run in runs:
        m = run.get("machine", {})
        text = "%s (%s%s) on %s" % (m.get("backend", "?"), m.get("arch", "?"),
                                   "" if not m.get("library_version") else ", librdna35attn " + m["library_version"],
                                   m.get("cpu", "unknown CPU"))
        if text not in machines:
            machines.append(text)
    return "r35a_bench: " + "; ".join(machines)


def short_count(x):
    """64, 1K, 32K, 1M: the context axis' tick labels."""
    for unit, size in (("M", 1 << 20), ("K", 1 << 10)):
        if x >= size and x % size == 0:
            return "%d%s" % (x // size, unit)
    return "%g" % x


def draw_peaks(axes, runs, colors, varying):
    """The bandwidth roof: one gray line when every run measured about the same peak (within 5%),
    else one dashed line per series in its color (each run's roofline % is against its own peak)."""
    peaks = [(run["peak"]["gbs"], run["peak"].get("source", ""), series_key(run)) for run in runs
             if isinstance(run.get("peak"), dict) and run["peak"].get("gbs")]
    if not peaks:
        return
    values = [gbs for gbs, _, _ in peaks]
    sources = "/".join(sorted({source for _, source, _ in peaks if source}))
    if max(values) <= 1.05 * min(values):
        text = ("peak %.0f GB/s" % values[0] if max(values) - min(values) < 0.5 else
                "peak %.0f-%.0f GB/s" % (min(values), max(values)))
        axes.axhline(max(values), linestyle="--", color="gray", linewidth=1)
        axes.annotate("%s (%s)" % (text, sources), (0.01, max(values)), xycoords=("axes fraction", "data"),
                      textcoords="offset points", xytext=(0, 3), fontsize=8, color="gray")
        return
    for gbs, source, key in peaks:
        axes.axhline(gbs, linestyle="--", linewidth=1, color=colors.get(key, "gray"),
                     label="peak %.0f GB/s (%s), %s" % (gbs, source, label_for(key, varying)))
    axes.legend(fontsize=7)


def plot(runs, output, title=None, dpi=120):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series, x_name, categories = collect(runs)
    if not series:
        raise SystemExit("plot_bench: the runs have no rows to plot")
    keys = list(series)
    varying = {name for i, (name, _) in enumerate(_SERIES_FIELDS) if len({k[i][1] for k in keys}) > 1}
    keys.sort(key=lambda k: tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for _, v in k))

    # Many series (a preset): the legend moves right of the axes, in columns; past MAX_LEGEND it is
    # left out (--where picks a subset to plot with one).
    many = len(keys) > 10
    legend_columns = 0 if len(keys) > MAX_LEGEND else (len(keys) + 29) // 30 if many else 1
    width = 9 + (3.2 * legend_columns if many else 0)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(width, 7.5))
    colors = {}
    all_x = set()
    for key in keys:
        points = series[key]
        xs = [p[0] for p in points]
        all_x.update(xs)
        label = label_for(key, varying)
        line, = top.plot(xs, [p[1] if p[1] is not None else float("nan") for p in points], marker="o", label=label)
        bottom.plot(xs, [p[2] if p[2] is not None else float("nan") for p in points], marker="o", label=label,
                    color=line.get_color())
        colors[key] = line.get_color()
    draw_peaks(bottom, runs, colors, varying)
    ticks = sorted(all_x)
    top.set_ylabel("% of roofline")
    top.set_ylim(bottom=0)
    top.grid(True, which="both", alpha=0.3)
    if legend_columns and many:
        top.legend(fontsize=6, ncol=legend_columns, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    elif legend_columns:
        top.legend(fontsize=8)
    bottom.set_ylabel("GB/s")
    bottom.set_ylim(bottom=0)
    bottom.set_xlabel(x_name)
    if categories:
        bottom.set_xticks(range(len(categories)))
        bottom.set_xticklabels(categories, rotation=15, fontsize=7, ha="right")
    else:
        bottom.set_xscale("log", base=2)
        bottom.set_xticks(ticks)
        bottom.set_xticklabels([short_count(x) for x in ticks])
        bottom.minorticks_off()
    bottom.grid(True, which="both", alpha=0.3)
    constant = dict(keys[0])
    common = ", ".join(fmt.format(constant[name]) for name, fmt in _SERIES_FIELDS
                       if name not in varying and name not in ("head_size", "backend")
                       and constant.get(name) is not None)
    if not legend_columns:
        common += "%s%d series (legend left out; --where FIELD=VALUE plots a subset)" % (", " if common else "",
                                                                                        len(keys))
    fig.suptitle((title or title_for(runs)) + ("\n" + common if common else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(output, dpi=dpi)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="r35a_bench --json output files ('-' = stdin)")
    parser.add_argument("-o", "--output", default="bench.png", help="PNG to write (default bench.png)")
    parser.add_argument("--title", help="title instead of the machine line from the JSON")
    parser.add_argument("--dpi", type=int, default=120)
    parser.add_argument("--where", action="append", default=[], metavar="FIELD=VALUE",
                        help="plot only the rows whose field (head_size, query_len, batch, page_size, ...) has "
                             "this value; repeatable")
    args = parser.parse_args(argv)
    runs = select_rows(read_runs(args.inputs), args.where)
    if importlib.util.find_spec("matplotlib") is None:
        print(SKIP_MESSAGE, file=sys.stderr)
        return 0
    plot(runs, args.output, args.title, args.dpi)
    print("plot_bench: wrote %s (%d run%s)" % (args.output, len(runs), "" if len(runs) == 1 else "s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
