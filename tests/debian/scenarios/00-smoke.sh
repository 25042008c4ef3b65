# vm-timeout: 30
log hello; systemctl is-system-running || true; lsmod | head; ls /dev/vd*
