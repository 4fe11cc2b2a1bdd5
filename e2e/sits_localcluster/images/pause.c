/*
 * pause: the process of a pod's sandbox ("infra") container, for containerd's
 * sandbox_image. It holds the pod's namespaces open and does nothing else.
 *
 * Why our own: there is no registry to pull registry.k8s.io/pause from. Built with
 * `gcc -static` (images/scratch.py) so the image needs no libc or anything else.
 *
 * As PID 1 of the pod it must handle its own signals (the kernel ignores default-action
 * signals sent to a namespace's init): SIGINT/SIGTERM end it with status 0, and SIGCHLD
 * reaps orphans re-parented to it (with a shared PID namespace every container's exited
 * children land here).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define VERSION "3.10"

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

static void handle(int sig, void (*handler)(int), int flags) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = handler;
  action.sa_flags = flags;
  sigemptyset(&action.sa_mask);
  if (sigaction(sig, &action, NULL) < 0) {
    perror("sigaction");
    _exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "-v") == 0) {
    printf("pause (sits) " VERSION "\n");
    return 0;
  }
  if (getpid() != 1) {
    fprintf(stderr, "pause: warning: not PID 1\n");
  }
  handle(SIGINT, on_stop, 0);
  handle(SIGTERM, on_stop, 0);
  handle(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART);
  for (;;) {
    pause();
  }
  return 42; /* not reached */
}
