/* The compile-like job of `nvmos kernel run`: as close to the seed's
 * kernel compile as a guest without a compiler gets. A compile is many
 * short-lived processes, each mapping its program, reading a source file
 * through the page cache, building its data in anonymous memory, writing
 * an object file, and exiting (freeing everything but the object's page
 * cache); the objects are deleted by the next `make clean`.
 *
 * `compilejob DIR [UNITS] [ROUNDS]`: writes UNITS "sources" (16 to 128
 * KiB of text from a fixed seed) into DIR, then ROUNDS times builds each
 * one: fork, exec busybox's gzip on the source with its output in an
 * object file (a real exec of a static program: its text mapped from the
 * page cache, its heap, stack and page tables allocated and freed), then
 * a "link" step in this process that maps every object, touches a buffer
 * of their total size in anonymous memory, and unmaps it; then deletes
 * the objects. Usage errors exit 2, a failed step 1. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned long long state = 0x2545f4914f6cdd1dull;

static unsigned long long next(void)
{
	state ^= state >> 12;
	state ^= state << 25;
	state ^= state >> 27;
	return state * 0x2545f4914f6cdd1dull;
}

static const char *words[] = {
	"static ", "int ", "return ", "struct page *", "unsigned long ", "if (", ") {\n",
	"}\n", "for (i = 0; i < n; i++)", " = ", ";\n", "zone->lock", "pfn", "order",
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: compilejob DIR [UNITS] [ROUNDS]\n");
		return 2;
	}
	const char *dir = argv[1];
	int units = argc > 2 ? atoi(argv[2]) : 100;
	int rounds = argc > 3 ? atoi(argv[3]) : 3;
	if (units < 1 || units > 100000 || rounds < 1) {
		fprintf(stderr, "compilejob: UNITS (1..100000) and ROUNDS must be positive\n");
		return 2;
	}
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		perror(dir);
		return 1;
	}
	char path[4096], obj[4096];
	static char text[128 << 10];
	for (int u = 0; u < units; u++) {
		size_t size = (16 << 10) + next() % (112 << 10), n = 0;
		while (n < size) {
			const char *w = words[next() % (sizeof(words) / sizeof(words[0]))];
			size_t l = strlen(w);
			if (n + l > size)
				break;
			memcpy(text + n, w, l);
			n += l;
		}
		snprintf(path, sizeof(path), "%s/u%05d.c", dir, u);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, text, n) != (ssize_t)n || close(fd) != 0) {
			perror(path);
			return 1;
		}
	}
	long long objects = 0;
	for (int round = 0; round < rounds; round++) {
		size_t total = 0;
		for (int u = 0; u < units; u++) {
			snprintf(path, sizeof(path), "%s/u%05d.c", dir, u);
			snprintf(obj, sizeof(obj), "%s/u%05d.o", dir, u);
			pid_t pid = fork();
			if (pid < 0) {
				perror("fork");
				return 1;
			}
			if (pid == 0) {
				int fd = open(obj, O_WRONLY | O_CREAT | O_TRUNC, 0644);
				if (fd < 0 || dup2(fd, 1) < 0)
					_exit(1);
				execl("/bin/busybox", "gzip", "-c", path, (char *)NULL);
				_exit(1);
			}
			int status;
			if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
			    WEXITSTATUS(status) != 0) {
				fprintf(stderr, "compilejob: building %s failed\n", path);
				return 1;
			}
			struct stat st;
			if (stat(obj, &st) != 0) {
				perror(obj);
				return 1;
			}
			total += (size_t)st.st_size;
			objects++;
		}
		/* The link: read every object, build the image in anonymous memory. */
		size_t image_size = (total + 4095) & ~(size_t)4095;
		char *image = mmap(NULL, image_size, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (image == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		size_t at = 0;
		for (int u = 0; u < units; u++) {
			snprintf(obj, sizeof(obj), "%s/u%05d.o", dir, u);
			int fd = open(obj, O_RDONLY);
			ssize_t r;
			if (fd < 0) {
				perror(obj);
				return 1;
			}
			while (at < image_size && (r = read(fd, image + at, image_size - at)) > 0)
				at += (size_t)r;
			close(fd);
			if (unlink(obj) != 0) {
				perror(obj);
				return 1;
			}
		}
		munmap(image, image_size);
		if (rounds <= 10 || round + 1 == rounds)
			printf("round %d: %d units built, %zu bytes linked\n", round, units, at);
	}
	printf("compilejob: %lld objects\n", objects);
	return 0;
}
