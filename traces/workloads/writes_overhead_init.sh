#!/bin/sh
/bin/busybox --install -s /bin
export PATH=/bin:/w
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
echo "guest up: $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPUs, $(grep MemTotal /proc/meminfo)"
dump() { { echo "==BEGIN $1=="; base64 "$2"; echo "==END $1=="; } ; }
rec() { # name args...
  name=$1; shift
  echo "run $name: $*"
  /w/nvmos record --json "$@" > /out/$name.json 2> /out/$name.err
  echo "$name rc=$? $(grep -m1 wall_ns /out/$name.json) $(cat /out/$name.time)"
  tail -2 /out/$name.err
}
cd /out
for i in 1 2 3 4 5; do
  for job in "sortjob 32 2" "memstress 512 2"; do
    n=${job%% *}
    rec $n-plain-$i -o /tmp/x.nvt -- /w/time -f "user %U sys %S wall %e minflt %R" -o /out/$n-plain-$i.time /w/$job
    rm -f /tmp/x.nvt
    rec $n-writes-$i --writes -o /tmp/x.nvt -- /w/time -f "user %U sys %S wall %e minflt %R" -o /out/$n-writes-$i.time /w/$job
    rm -f /tmp/x.nvt
  done
done
for i in 1 2 3; do
  rec sortjob-w50-$i --writes --write-interval 50 -o /tmp/x.nvt -- /w/time -f "user %U sys %S wall %e minflt %R" -o /out/sortjob-w50-$i.time /w/sortjob 32 2
  rm -f /tmp/x.nvt
done
rm -f /out/*.nvt
tar -cf /tmp/out.tar -C /out .
dump out.tar /tmp/out.tar
echo "==ALL DONE=="
sync
poweroff -f
