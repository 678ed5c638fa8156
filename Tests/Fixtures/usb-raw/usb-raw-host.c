/* A raw libusb host loop, the reference for the host side and, against serve-gadget, a client
 * with no overhead of its own (scripts/usb-vm-bench). Four 64 KiB bulk transfers in flight, or
 * SIZE bytes each and FLIGHT of them (at most 16) when given.
 *
 *   usb-raw-host in BYTES [SIZE [FLIGHT]]   read BYTES from bulk IN (against ffs-raw's source)
 *   usb-raw-host out BYTES    write BYTES to bulk OUT (against ffs-raw's sink)
 *   usb-raw-host get BYTES    HTTP/1.1 GET /bytes/BYTES over the pair; reads head and body
 *   usb-raw-host post BYTES   HTTP/1.1 POST /upload?digest=none with a BYTES body; reads the answer
 *
 * Prints "MiB/s SECONDS". Device 1209:0001, interface 0, endpoints 0x81 and 0x02.
 */
#include <libusb-1.0/libusb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_FLIGHT 16

static int transfer_size = 65536;
static int flight = 4;

static libusb_device_handle *device;
static long long wanted, done_bytes, submitted_bytes;
static int active, failed;
static char head[4096];
static size_t head_length;
static long long head_needed = -1; /* get: bytes of the head still unknown (-1) */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void LIBUSB_CALL completed(struct libusb_transfer *transfer) {
    active--;
    if (transfer->status == LIBUSB_TRANSFER_CANCELLED && done_bytes >= wanted) return;
    if (transfer->status != LIBUSB_TRANSFER_COMPLETED) { failed = 1; return; }
    int length = transfer->actual_length;
    if (head_needed == -1 && transfer->endpoint & 0x80) {
        /* get: find the end of the head in the first bytes, then count only the body */
        size_t take = length < (int)(sizeof head - head_length - 1) ? (size_t)length : sizeof head - head_length - 1;
        memcpy(head + head_length, transfer->buffer, take);
        head_length += take;
        head[head_length] = 0;
        char *end = strstr(head, "\r\n\r\n");
        if (end) { head_needed = 0; length -= (int)((end + 4 - head) - (head_length - take)); }
        else length = 0;
    }
    done_bytes += length;
    if (transfer->endpoint & 0x80) {
        if (done_bytes < wanted && !failed) { if (libusb_submit_transfer(transfer) == 0) active++; else failed = 1; }
    } else if (submitted_bytes < wanted && !failed) {
        int next = wanted - submitted_bytes < transfer_size ? (int)(wanted - submitted_bytes) : transfer_size;
        transfer->length = next;
        submitted_bytes += next;
        if (libusb_submit_transfer(transfer) == 0) active++; else failed = 1;
    }
}

static int run(unsigned char endpoint, long long bytes) {
    wanted = bytes; done_bytes = 0; submitted_bytes = 0; failed = 0;
    struct libusb_transfer *transfers[MAX_FLIGHT] = {0};
    for (int i = 0; i < flight; i++) {
        transfers[i] = libusb_alloc_transfer(0);
        unsigned char *buffer = calloc(1, transfer_size);
        int length = transfer_size;
        if (!(endpoint & 0x80)) {
            if (submitted_bytes >= wanted) break;
            length = wanted - submitted_bytes < transfer_size ? (int)(wanted - submitted_bytes) : transfer_size;
            submitted_bytes += length;
        }
        libusb_fill_bulk_transfer(transfers[i], device, endpoint, buffer, length, completed, NULL, 20000);
        if (libusb_submit_transfer(transfers[i]) != 0) return -1;
        active++;
    }
    while (active > 0 && !(endpoint & 0x80 ? done_bytes >= wanted : 0)) libusb_handle_events(NULL);
    if (endpoint & 0x80) {  /* stop the reads still in flight */
        for (int i = 0; i < flight; i++) if (transfers[i]) libusb_cancel_transfer(transfers[i]);
        while (active > 0) libusb_handle_events(NULL);
    }
    return failed ? -1 : 0;
}

/* Writes a short message to bulk OUT (a request head). */
static int send_text(const char *text) {
    int sent = 0;
    return libusb_bulk_transfer(device, 0x02, (unsigned char *)text, (int)strlen(text), &sent, 5000);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) { fprintf(stderr, "usage: usb-raw-host in|out|get|post BYTES [SIZE [FLIGHT]]\n"); return 64; }
    long long bytes = atoll(argv[2]);
    if (argc > 3) transfer_size = atoi(argv[3]);
    if (argc > 4) flight = atoi(argv[4]);
    if (transfer_size < 512 || transfer_size > (1 << 20) || flight < 1 || flight > MAX_FLIGHT) {
        fprintf(stderr, "SIZE must be 512 … 1048576 and FLIGHT 1 … %d\n", MAX_FLIGHT);
        return 64;
    }
    if (libusb_init(NULL) != 0) return 69;
    device = libusb_open_device_with_vid_pid(NULL, 0x1209, 0x0001);
    if (!device) { fprintf(stderr, "no device 1209:0001\n"); return 69; }
    libusb_set_auto_detach_kernel_driver(device, 1);
    if (libusb_claim_interface(device, 0) != 0 || libusb_set_interface_alt_setting(device, 0, 0) != 0) {
        fprintf(stderr, "could not claim interface 0\n");
        return 69;
    }
    double started = now();
    int result;
    if (!strcmp(argv[1], "in")) {
        head_needed = 0;
        result = run(0x81, bytes);
    } else if (!strcmp(argv[1], "out")) {
        result = run(0x02, bytes);
    } else if (!strcmp(argv[1], "get")) {
        char request[128];
        snprintf(request, sizeof request, "GET /bytes/%lld HTTP/1.1\r\nHost: a\r\n\r\n", bytes);
        result = send_text(request) == 0 ? run(0x81, bytes) : -1;
    } else if (!strcmp(argv[1], "post")) {
        char request[160];
        /* No SHA-256 of the body: under TCG hashing is slower than the link being measured. */
        snprintf(request, sizeof request, "POST /upload?digest=none HTTP/1.1\r\nHost: a\r\nContent-Length: %lld\r\n\r\n", bytes);
        result = send_text(request) == 0 ? run(0x02, bytes) : -1;
        if (result == 0) {  /* the answer: one read is enough for its head */
            unsigned char answer[4096];
            int got = 0;
            result = libusb_bulk_transfer(device, 0x81, answer, sizeof answer, &got, 10000) == 0 && got > 0 ? 0 : -1;
        }
    } else {
        return 64;
    }
    double elapsed = now() - started;
    if (result != 0) { fprintf(stderr, "transfer failed after %lld bytes\n", done_bytes); return 1; }
    printf("%.1f %.3f\n", bytes / elapsed / 1048576.0, elapsed);
    libusb_release_interface(device, 0);
    libusb_close(device);
    libusb_exit(NULL);
    return 0;
}
