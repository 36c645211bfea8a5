#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, to run the workflow through profiles/slurm for
# real: munge, slurmctld and slurmd, with no accounting database (as many small clusters).
#
#   sudo scripts/slurm_one_node.sh start     # prints the SLURM_CONF to export
#   export SLURM_CONF=/tmp/agon-slurm/slurm.conf
#   snakemake --profile profiles/slurm --configfile config/config.yaml
#   sudo scripts/slurm_one_node.sh stop
#
# Needs root and Debian/Ubuntu's packages: apt-get install slurm-wlm munge. The node is
# described by `slurmd -C` (its CPUs and memory). Everything the cluster writes (config, state,
# logs, pid files) lives under AGON_SLURM_DIR (default /tmp/agon-slurm). Under /etc: a munge
# key, created if the munge package left none, and /etc/slurm/slurm.conf as a link to that
# config if there is none (srun inside a job step reads the default path, whatever SLURM_CONF
# the job inherited), removed again by `stop`. MinJobAge is an hour,
# so finished jobs stay visible to squeue and `scontrol show job` without accounting.
set -euo pipefail

DIR="${AGON_SLURM_DIR:-/tmp/agon-slurm}"
CONF="$DIR/slurm.conf"
MUNGE_SOCKET_DIR=/run/munge

die() { echo "slurm_one_node: $*" >&2; exit 1; }

need() {
    [ "$(id -u)" = 0 ] || die "must run as root (munged, slurmctld and slurmd are system daemons)"
    for bin in munged slurmctld slurmd sbatch squeue scontrol; do
        command -v "$bin" >/dev/null || die "$bin not found: apt-get install slurm-wlm munge"
    done
}

start_munge() {
    if [ -S "$MUNGE_SOCKET_DIR/munge.socket.2" ] && munge -n >/dev/null 2>&1; then
        return  # a munged is already answering
    fi
    if [ ! -s /etc/munge/munge.key ]; then
        install -d -o munge -g munge -m 0700 /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    install -d -o munge -g munge -m 0755 "$MUNGE_SOCKET_DIR"
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    runuser -u munge -- munged --pid-file="$MUNGE_SOCKET_DIR/munged.pid"
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 && return; sleep 0.1; done
    die "munged did not answer"
}

write_conf() {
    local node host
    host="$(hostname -s)"
    node="$(slurmd -C | head -n 1)"  # NodeName=... CPUs=... RealMemory=...
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
    cat > "$CONF" <<EOF
ClusterName=agon
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
MinJobAge=3600
SchedulerType=sched/backfill
$node State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
    need
    stop_daemons quiet
    start_munge
    write_conf
    export SLURM_CONF="$CONF"
    if [ ! -e /etc/slurm/slurm.conf ]; then
        mkdir -p /etc/slurm
        ln -s "$CONF" /etc/slurm/slurm.conf
        touch "$DIR/linked-etc"
    fi
    slurmctld
    slurmd
    for _ in $(seq 100); do
        if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
            echo "SLURM_CONF=$CONF"
            return
        fi
        sleep 0.2
    done
    die "the node did not come up idle; see $DIR/log"
}

stop_daemons() {
    local pid
    if [ -f "$CONF" ]; then
        SLURM_CONF="$CONF" scancel --user=root >/dev/null 2>&1 || true
    fi
    for name in slurmd slurmctld; do
        if [ -f "$DIR/$name.pid" ]; then
            pid="$(cat "$DIR/$name.pid")"
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            rm -f "$DIR/$name.pid"
        fi
    done
    if [ -f "$DIR/linked-etc" ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$CONF" ]; then
        rm -f /etc/slurm/slurm.conf "$DIR/linked-etc"
    fi
    if [ "${1:-}" != quiet ] && [ -f "$MUNGE_SOCKET_DIR/munged.pid" ]; then
        kill "$(cat "$MUNGE_SOCKET_DIR/munged.pid")" 2>/dev/null || true
    fi
}

case "${1:-}" in
    start) start ;;
    stop) need; stop_daemons; echo "stopped" ;;
    conf) echo "$CONF" ;;
    *) die "usage: $0 start|stop|conf" ;;
esac
