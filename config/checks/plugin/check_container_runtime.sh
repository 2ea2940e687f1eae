#!/bin/sh
# Exit 0 when the container runtime answers `crictl info`, 1 when it does not, 2 without crictl.
if ! command -v crictl >/dev/null 2>&1; then
  echo "cannot tell: crictl is not installed"
  exit 2
fi
if out=$(crictl --timeout 10s info 2>&1 >/dev/null); then
  echo "container runtime answers"
  exit 0
fi
echo "crictl info failed: $(echo "$out" | head -n 1)"
exit 1
