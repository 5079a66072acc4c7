#!/bin/sh
export PATH=/bin:/w
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
echo "guest up: $(uname -r), $(grep MemTotal /proc/meminfo)"
dump() { # name file
  { echo "==BEGIN $1=="; base64 "$2"; echo "==END $1=="; } 
}
rec() { # name args...
  name=$1; shift
  echo "run $name: $*"
  /w/nvmos record --json "$@" > /out/$name.json 2> /out/$name.err
  echo "rc=$? $(grep -m1 wall_ns /out/$name.json)"
  cat /out/$name.err
  dump $name.json /out/$name.json
}
cd /out
for i in 1 2 3; do
  rec memstress-plain-$i -o /out/m-plain-$i.nvt -- memstress 512 2
  rm -f /out/m-plain-$i.nvt
  rec memstress-writes-$i --writes -o /out/memstress-writes-$i.nvt -- memstress 512 2
  if [ $i = 1 ]; then dump memstress-writes-$i.nvt /out/memstress-writes-$i.nvt; fi
  rm -f /out/memstress-writes-$i.nvt
done
rec sortjob-writes-1 --writes -o /out/sortjob-writes-1.nvt -- sortjob 32 2
dump sortjob-writes-1.nvt /out/sortjob-writes-1.nvt
echo "==ALL DONE==" 
echo "all done"
sync
poweroff -f
