#!/bin/sh
# Exit 0 when the clock is synchronised, 1 when not, 2 when it cannot be told (NPD's convention).
if command -v chronyc >/dev/null 2>&1 && chronyc -n tracking >/tmp/.chrony.$$ 2>/dev/null; then
  status=$(sed -n 's/^Leap status *: *//p' /tmp/.chrony.$$); rm -f /tmp/.chrony.$$
  if [ "$status" = "Normal" ]; then echo "chrony: clock synchronised"; exit 0; fi
  echo "chrony: leap status ${status:-unknown}"; exit 1
fi
rm -f /tmp/.chrony.$$
if command -v timedatectl >/dev/null 2>&1; then
  synced=$(timedatectl show -p NTPSynchronized --value 2>/dev/null)
  case "$synced" in
    yes) echo "timedatectl: clock synchronised"; exit 0 ;;
    no) echo "timedatectl: clock not synchronised"; exit 1 ;;
  esac
fi
echo "cannot tell: neither chronyc nor timedatectl answered"
exit 2
