#!/usr/bin/env python3
"""Real Helm for the tests, without a helm binary: helm-python-sdk (PyPI) binds Helm's Go SDK (v4).

    helm.py template RELEASE CHART --namespace NS [--values FILE]   # like `helm template`
    helm.py lint CHART [--values FILE]                              # like `helm lint --strict`

template prints the rendered manifests as one YAML stream (NOTES.txt and helpers left out, as
`helm template` does); lint prints each finding and exits 1 on any warning or error.
Exit status 3 when helm-python-sdk is not installed (the caller says the test is skipped).
"""

import argparse
import json
import sys

try:
    import helm_python as helm
except ImportError:
    print("helm-python-sdk is not installed (pip install helm-python-sdk)", file=sys.stderr)
    sys.exit(3)


def values(path):
    if not path:
        return None
    with open(path) as f:
        return helm.values_from_yaml(f.read())


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("template")
    t.add_argument("release")
    t.add_argument("chart")
    t.add_argument("--namespace", default="default")
    t.add_argument("--values")
    l = sub.add_parser("lint")
    l.add_argument("chart")
    l.add_argument("--values")
    a = p.parse_args()
    try:
        if a.cmd == "template":
            chart = helm.Chart.load(a.chart)
            rendered = chart.render(values(a.values), name=a.release, namespace=a.namespace, is_install=True)
            for path in sorted(rendered):
                if path.endswith("NOTES.txt") or not rendered[path].strip():
                    continue
                sys.stdout.write(f"---\n# Source: {path}\n{rendered[path].strip()}\n")
            return 0
        report = helm.lint(a.chart, values(a.values), strict=True)
        for m in report.get("messages", []):
            print(f"[{['UNKNOWN', 'INFO', 'WARNING', 'ERROR'][m['severity']]}] {m['path']}: {m['error']}")
        for e in report.get("errors") or []:
            print(f"[ERROR] {e}")
        bad = [m for m in report.get("messages", []) if m["severity"] >= 2] or report.get("errors")
        return 1 if bad else 0
    except helm.HelmError as e:
        print(f"helm: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
