package allreduce

import "syscall"

// osYield gives this thread's core to another runnable thread, if any
// (sched_yield): a member spinning for a peer's frame must not keep the
// peer itself off the core when the host has fewer cores than threads.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
