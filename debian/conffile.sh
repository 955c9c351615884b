#!/bin/sh
# conffile.sh CONF: /etc/leafd/leafd.conf for the package, printed: the
# repo's conf/leafd.conf (the embedded default: SQLite segments, a static
# snowflake worker ID) with its state put in the unit's StateDirectory,
# /var/lib/leafd. Fails if a line it changes is not in CONF any more.
set -e
conf=$1
for line in '^segment\.sqlite\.path = leafd\.db$' '^#snowflake\.cache_file =$' \
        '^#segment\.marks_file =$'; do
    if ! grep -q "$line" "$conf"; then
        echo "conffile.sh: no line $line in $conf" >&2
        exit 1
    fi
done
echo "# /etc/leafd/leafd.conf, installed by the leafd package (leafd.service"
echo "# reads it; systemctl restart leafd after a change, or reload for"
echo "# log.level, log.file and the tag list)."
echo "#"
sed -e 's|^segment\.sqlite\.path = leafd\.db$|segment.sqlite.path = /var/lib/leafd/leafd.db|' \
    -e 's|^#snowflake\.cache_file =$|snowflake.cache_file = /var/lib/leafd/snowflake-cache.json|' \
    -e 's|^#segment\.marks_file =$|segment.marks_file = /var/lib/leafd/segment-marks|' \
    "$conf"
