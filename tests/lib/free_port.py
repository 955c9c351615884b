#!/usr/bin/env python3
"""free_port.py: print a loopback TCP port that nothing listens on, in
20000-32767: below the kernel's ephemeral range (32768-60999), so that no
outgoing connection takes it while a slow server (mariadb-install-db, the
JVM) gets ready to bind it; above the slices blackbox.py -j hands out; never
8080. Exits 1 if no port binds in 200 tries. mariadb.sh and zookeeper.sh
call it."""
import random
import socket
import sys

for _ in range(200):
    p = random.randint(20000, 32767)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    sys.exit(0)
sys.exit(1)
