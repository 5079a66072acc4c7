/* nvmos' harness for will-it-scale test cases (`nvmos kernel wis`).
 *
 * Linked with one test case of a will-it-scale checkout, `tests/NAME.c`,
 * which defines
 *
 *   char *testcase_description;
 *   void testcase(unsigned long long *iterations, unsigned long nr);
 *
 * and may define testcase_prepare(unsigned long nr_tasks) and
 * testcase_cleanup(void), called in the parent before the tasks start and
 * after they are stopped. testcase() loops forever, adding each operation
 * it completes to *iterations.
 *
 * `wis-NAME -n NAME -t TASKS[,TASKS...] -w WARMUP_MS -i INTERVAL_MS -s SAMPLES`
 *
 * First it starts a yield helper on every CPU (see start_helpers). Then,
 * for each task count in turn: forks that many processes, task i bound
 * to CPU i modulo the online CPUs, each running testcase() with its own
 * counter in a shared anonymous mapping (one counter per 256 bytes, so no
 * two tasks write one cache line); lets them run WARMUP_MS, then reads the
 * counters every INTERVAL_MS of CLOCK_MONOTONIC, SAMPLES times; then kills
 * the tasks. Every line of standard output is one record of words
 * `key=value` (a description last, running to the end of the line):
 *
 *   wis-test test=NAME tasks=N cpus=C description=TEXT
 *   wis-sample test=NAME tasks=N sample=K ns=ELAPSED ops=SUM task_ops=A,B,...
 *   wis-end test=NAME tasks=N
 *   wis-error test=NAME tasks=N what=TEXT        (then exit status 1)
 *
 * ns is the interval's length as measured, ops the operations the tasks
 * completed in it (task_ops: each task's). A task that ends before it is
 * stopped (a failed assert in the test case, say) is an error, and so is
 * a yield helper that ends.
 *
 * Written for nvmos; it shares no code with will-it-scale's own main.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char *testcase_description;
void testcase(unsigned long long *iterations, unsigned long nr);
void testcase_prepare(unsigned long nr_tasks) __attribute__((weak));
void testcase_cleanup(void) __attribute__((weak));

#define MAX_TASKS 256
#define STRIDE 256 /* bytes between two tasks' counters */

static const char *name = "?";
static unsigned long cur_tasks;
static pid_t pids[MAX_TASKS];
static unsigned long nr_pids;
static pid_t helpers[MAX_TASKS];
static unsigned long nr_helpers;

static void kill_all(pid_t *p, unsigned long *n)
{
	for (unsigned long i = 0; i < *n; i++)
		kill(p[i], SIGKILL);
	for (unsigned long i = 0; i < *n; i++)
		while (waitpid(p[i], NULL, 0) < 0 && errno == EINTR)
			;
	*n = 0;
}

static void kill_tasks(void)
{
	kill_all(pids, &nr_pids);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	kill_tasks();
	kill_all(helpers, &nr_helpers);
	printf("wis-error test=%s tasks=%lu what=", name, cur_tasks);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

static unsigned long long now_ns(void)
{
	struct timespec t;

	if (clock_gettime(CLOCK_MONOTONIC, &t))
		fail("clock_gettime: %s", strerror(errno));
	return (unsigned long long)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static void sleep_until(unsigned long long ns)
{
	struct timespec t = { .tv_sec = ns / 1000000000ull, .tv_nsec = ns % 1000000000ull };
	int e;

	while ((e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL)) == EINTR)
		;
	if (e)
		fail("clock_nanosleep: %s", strerror(e));
}

/* Fail if a task has ended: none may before it is stopped. */
static void check_tasks(void)
{
	int status;
	pid_t pid = waitpid(-1, &status, WNOHANG);

	if (pid <= 0)
		return;
	for (unsigned long i = 0; i < nr_helpers; i++) {
		if (helpers[i] != pid)
			continue;
		helpers[i] = helpers[--nr_helpers];
		fail("a yield helper ended (wait status %#x): it needs SCHED_FIFO (root)",
		     status);
	}
	for (unsigned long i = 0; i < nr_pids; i++) {
		if (pids[i] != pid)
			continue;
		pids[i] = pids[--nr_pids];
		if (WIFSIGNALED(status))
			fail("task %lu was killed by signal %d (%s)", i, WTERMSIG(status),
			     strsignal(WTERMSIG(status)));
		fail("task %lu exited with status %d: testcase() returned or exited", i,
		     WEXITSTATUS(status));
	}
}

/*
 * One helper per CPU, SCHED_FIFO and bound to it, wakes at every timer
 * tick and executes PAUSE. Under QEMU's -icount the vCPUs take turns on
 * one host thread, and QEMU before 8.1 gives each turn's whole budget (up
 * to the next timer deadline) to the first vCPU, the others running only
 * when it executes PAUSE or HLT: with a busy task on every vCPU, the
 * first would run alone for ever and the others starve (a vCPU stuck
 * with an IPI pending, RCU stalls, the whole guest stopping). The
 * helpers' PAUSE ends a turn at least once a tick on every vCPU; their
 * own cost is a wake-up a tick per CPU, in every run alike.
 */
static void start_helpers(long cpus)
{
	for (long c = 0; c < cpus && c < MAX_TASKS; c++) {
		pid_t pid = fork();

		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (pid == 0) {
			struct sched_param sp = { .sched_priority = 1 };
			struct timespec tick = { .tv_sec = 0, .tv_nsec = 1000000 };
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET(c, &set);
			if (sched_setaffinity(0, sizeof(set), &set) ||
			    sched_setscheduler(0, SCHED_FIFO, &sp))
				_exit(4);
			for (;;) {
				nanosleep(&tick, NULL);
#if defined(__x86_64__) || defined(__i386__)
				__asm__ volatile("pause" ::: "memory");
#endif
			}
		}
		helpers[nr_helpers++] = pid;
	}
}

static unsigned long parse_ul(const char *s, const char *what)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end)
		fail("bad %s %s", what, s);
	return v;
}

static void run(unsigned long tasks, unsigned long long warmup_ns,
		unsigned long long interval_ns, unsigned long samples)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long long prev[MAX_TASKS], t_prev;
	volatile unsigned long long *counter;
	int gate[2];
	char *area;

	cur_tasks = tasks;
	if (cpus < 1)
		cpus = 1;
	area = mmap(NULL, tasks * STRIDE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		fail("mapping the counters: %s", strerror(errno));
	if (pipe(gate))
		fail("pipe: %s", strerror(errno));
	if (testcase_prepare)
		testcase_prepare(tasks);
	printf("wis-test test=%s tasks=%lu cpus=%ld description=%s\n", name, tasks, cpus,
	       testcase_description ? testcase_description : "");
	fflush(stdout);
	for (unsigned long i = 0; i < tasks; i++) {
		pid_t pid = fork();

		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (pid == 0) {
			cpu_set_t set;
			char byte;

			close(gate[1]);
			CPU_ZERO(&set);
			CPU_SET(i % cpus, &set);
			if (sched_setaffinity(0, sizeof(set), &set))
				_exit(2);
			/* Wait until every task exists: the gate closes. */
			while (read(gate[0], &byte, 1) < 0 && errno == EINTR)
				;
			testcase((unsigned long long *)(area + i * STRIDE), i);
			_exit(3);
		}
		pids[nr_pids++] = pid;
	}
	close(gate[0]);
	close(gate[1]);
	counter = (volatile unsigned long long *)area;
	sleep_until(now_ns() + warmup_ns);
	check_tasks();
	t_prev = now_ns();
	for (unsigned long i = 0; i < tasks; i++)
		prev[i] = counter[i * (STRIDE / sizeof(*counter))];
	for (unsigned long k = 1; k <= samples; k++) {
		unsigned long long t, sum = 0, ops[MAX_TASKS];

		/* From the last reading: an interval that overran (the
		 * guest stalled) is not followed by short ones. */
		sleep_until(t_prev + interval_ns);
		t = now_ns();
		for (unsigned long i = 0; i < tasks; i++) {
			unsigned long long v = counter[i * (STRIDE / sizeof(*counter))];

			ops[i] = v - prev[i];
			prev[i] = v;
			sum += ops[i];
		}
		check_tasks();
		printf("wis-sample test=%s tasks=%lu sample=%lu ns=%llu ops=%llu task_ops=", name,
		       tasks, k, t - t_prev, sum);
		for (unsigned long i = 0; i < tasks; i++)
			printf("%s%llu", i ? "," : "", ops[i]);
		printf("\n");
		fflush(stdout);
		t_prev = t;
	}
	kill_tasks();
	if (testcase_cleanup)
		testcase_cleanup();
	munmap(area, tasks * STRIDE);
	printf("wis-end test=%s tasks=%lu\n", name, tasks);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	unsigned long warmup_ms = 1000, interval_ms = 1000, samples = 5;
	unsigned long counts[MAX_TASKS], nr_counts = 0;
	char *list = NULL;
	int opt;

	while ((opt = getopt(argc, argv, "n:t:w:i:s:")) != -1) {
		switch (opt) {
		case 'n':
			name = optarg;
			break;
		case 't':
			list = optarg;
			break;
		case 'w':
			warmup_ms = parse_ul(optarg, "warm-up (ms)");
			break;
		case 'i':
			interval_ms = parse_ul(optarg, "interval (ms)");
			break;
		case 's':
			samples = parse_ul(optarg, "sample count");
			break;
		default:
			fail("usage: %s -n NAME -t TASKS[,TASKS...] -w WARMUP_MS -i INTERVAL_MS -s SAMPLES",
			     argv[0]);
		}
	}
	if (optind != argc || !list)
		fail("usage: %s -n NAME -t TASKS[,TASKS...] -w WARMUP_MS -i INTERVAL_MS -s SAMPLES",
		     argv[0]);
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		unsigned long n = parse_ul(tok, "task count");

		if (n < 1 || n > MAX_TASKS || nr_counts == MAX_TASKS)
			fail("task count %s: between 1 and %d", tok, MAX_TASKS);
		counts[nr_counts++] = n;
	}
	if (interval_ms < 1 || samples < 1)
		fail("the interval and the sample count must be at least 1");
	fflush(stdout);
	start_helpers(sysconf(_SC_NPROCESSORS_ONLN));
	for (unsigned long c = 0; c < nr_counts; c++)
		run(counts[c], warmup_ms * 1000000ull, interval_ms * 1000000ull, samples);
	kill_all(helpers, &nr_helpers);
	return 0;
}
