#!/bin/busybox sh
# /init of the QEMU guest that recorded the shipped workloads with sampled
# writes (traces/README.md): the repository's kernel (soft-dirty on) with
# the host's root shared read-only over virtio-9p; each workload runs in a
# chroot of the host's root with its own /proc, /sys, /dev and a tmpfs
# /tmp, under this repository's release `nvmos record --writes`. Booted by
# `cargo run -p nvmos-kernel --example guest_init -- THIS OUT 3072 2`,
# which puts the repository's path for @REPO@ and the nvmos binary for
# @NVMOS@; the traces come out as OUT/out.tar.
# MODE: `traces` (the three workloads; each trace comes out only when all
# are done), `compile` (the compile job alone) or `rest` (the file job's
# first 150 s, then the numpy job; numpy needs QEMU_CPU=max, see
# traces/README.md).
MODE=@MODE@
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
(while :; do sleep 5; echo nvmos-heartbeat; done) &
H=/mnt
mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,ro hostroot $H || echo "9p mount failed"
mount -t proc proc $H/proc
mount -t sysfs sys $H/sys
mount -t devtmpfs dev $H/dev
mount -t tmpfs -o size=75% tmp $H/tmp
mkdir -p $H/tmp/out
echo nvmos-guest-start
echo "guest: $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPUs, $(grep MemTotal /proc/meminfo)"
# in_host 'shell command': run in the chroot from the repository's root.
in_host() {
  chroot $H /usr/bin/env -i PATH=/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin HOME=/root \
    /bin/sh -c "cd @REPO@ && $1"
}
# rec NAME ARGS...: `nvmos record ARGS` with its JSON summary in out/NAME.json.
rec() {
  name=$1; shift
  echo "run $name: $*"
  in_host "@NVMOS@ record --json $* > /tmp/out/$name.json 2> /tmp/out/$name.err"
  echo "$name: rc=$? $(grep -m1 wall_ns $H/tmp/out/$name.json)"
  tail -3 $H/tmp/out/$name.err
}
case $MODE in
traces)
  rec compile --writes -o /tmp/out/compile_writes.nvt -- timeout 60 env CARGO_TARGET_DIR=/tmp/tt3 cargo build -q --offline --release -p nvmos-trace
  rec files --writes -o /tmp/out/files_writes.nvt -- sh -c "'tar -cf - /usr/share/doc /usr/include /usr/share/man | gzip -1 > /tmp/files.tar.gz; rm /tmp/files.tar.gz'"
  rec numpy --writes -o /tmp/out/numpy_writes.nvt -- timeout 300 /work/venv/bin/python3 traces/workloads/numpy_job.py
  rm -rf $H/tmp/tt3
  ;;
compile)
  rec compile --writes -o /tmp/out/compile_writes.nvt -- timeout 60 env CARGO_TARGET_DIR=/tmp/tt3 cargo build -q --offline --release -p nvmos-trace
  rm -rf $H/tmp/tt3
  ;;
rest)
  rec files --writes -o /tmp/out/files_writes.nvt -- timeout 150 sh -c "'tar -cf - /usr/share/doc /usr/include /usr/share/man | gzip -1 > /tmp/files.tar.gz; rm -f /tmp/files.tar.gz'"
  rec numpy --writes -o /tmp/out/numpy_writes.nvt -- timeout 300 /work/venv/bin/python3 traces/workloads/numpy_job.py
  ;;
esac
tar -cf $H/tmp/out.tar -C $H/tmp/out .
size=$(wc -c < $H/tmp/out.tar)
dd if=$H/tmp/out.tar of=/dev/vda bs=1048576 seek=512 2>/dev/null
{
echo "==nvmos:mode=="; echo $MODE
echo "==nvmos:out_size=="; echo $size
echo "==nvmos:end=="
} > /dev/vda
sync
echo nvmos-guest-done
reboot -f
