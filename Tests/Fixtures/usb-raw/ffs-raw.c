/* A raw FunctionFS function, the reference for serve-gadget's throughput (scripts/usb-vm-bench):
 * the same interface (class ff/48/01, bulk IN 0x81 and bulk OUT 0x02 at full, high and super
 * speed) with nothing behind it: one thread writes WRITE_SIZE bytes to ep1 in a loop (a source),
 * one reads ep2 into a 64 KiB buffer in a loop (a sink), one reads ep0's events.
 *
 *   ffs-raw DIR [WRITE_SIZE]      (DIR: where functionfs is mounted, e.g. /dev/ffs-accessory)
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/usb/ch9.h>
#include <linux/usb/functionfs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct endpoint { struct usb_endpoint_descriptor_no_audio d; } __attribute__((packed));
struct ss_endpoint { struct usb_endpoint_descriptor_no_audio d; struct usb_ss_ep_comp_descriptor c; } __attribute__((packed));
struct speed { struct usb_interface_descriptor i; struct endpoint in, out; } __attribute__((packed));
struct ss_speed { struct usb_interface_descriptor i; struct ss_endpoint in, out; } __attribute__((packed));

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the descriptors below are written little-endian as they stand"
#endif
#define LE(x) (x)
#define INTERFACE { .bLength = USB_DT_INTERFACE_SIZE, .bDescriptorType = USB_DT_INTERFACE, .bNumEndpoints = 2, \
    .bInterfaceClass = 0xff, .bInterfaceSubClass = 0x48, .bInterfaceProtocol = 0x01, .iInterface = 1 }
#define EP(address, size) { .bLength = USB_DT_ENDPOINT_SIZE, .bDescriptorType = USB_DT_ENDPOINT, \
    .bEndpointAddress = address, .bmAttributes = USB_ENDPOINT_XFER_BULK, .wMaxPacketSize = LE(size) }
#define COMP { .bLength = USB_DT_SS_EP_COMP_SIZE, .bDescriptorType = USB_DT_SS_ENDPOINT_COMP }

static const struct {
    struct usb_functionfs_descs_head_v2 header;
    __le32 fs_count, hs_count, ss_count;
    struct speed fs, hs;
    struct ss_speed ss;
} __attribute__((packed)) descriptors = {
    .header = {
        .magic = LE(FUNCTIONFS_DESCRIPTORS_MAGIC_V2),
        .length = LE(sizeof descriptors),
        .flags = LE(FUNCTIONFS_HAS_FS_DESC | FUNCTIONFS_HAS_HS_DESC | FUNCTIONFS_HAS_SS_DESC),
    },
    .fs_count = LE(3), .hs_count = LE(3), .ss_count = LE(5),
    .fs = { INTERFACE, { EP(0x81, 64) }, { EP(0x02, 64) } },
    .hs = { INTERFACE, { EP(0x81, 512) }, { EP(0x02, 512) } },
    .ss = { INTERFACE, { EP(0x81, 1024), COMP }, { EP(0x02, 1024), COMP } },
};

static const struct {
    struct usb_functionfs_strings_head header;
    struct { __le16 code; const char text[8]; } __attribute__((packed)) lang;
} __attribute__((packed)) strings = {
    .header = { .magic = LE(FUNCTIONFS_STRINGS_MAGIC), .length = LE(sizeof strings),
                .str_count = LE(1), .lang_count = LE(1) },
    .lang = { LE(0x0409), "ffs-raw" },
};

static int ep_in, ep_out;
static size_t write_size = 16384;

static void *source(void *unused) {
    char *buffer = calloc(1, write_size);
    for (;;) {
        if (write(ep_in, buffer, write_size) < 0) usleep(10000);  /* disabled: wait */
    }
    return unused;
}

static void *sink(void *unused) {
    char *buffer = malloc(65536);
    for (;;) {
        if (read(ep_out, buffer, 65536) < 0) usleep(10000);
    }
    return unused;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: ffs-raw DIR [WRITE_SIZE]\n"); return 64; }
    if (argc > 2) write_size = (size_t)atol(argv[2]);
    char path[512];
    snprintf(path, sizeof path, "%s/ep0", argv[1]);
    int ep0 = open(path, O_RDWR);
    if (ep0 < 0) { perror(path); return 69; }
    if (write(ep0, &descriptors, sizeof descriptors) < 0) { perror("descriptors"); return 69; }
    if (write(ep0, &strings, sizeof strings) < 0) { perror("strings"); return 69; }
    snprintf(path, sizeof path, "%s/ep1", argv[1]);
    ep_in = open(path, O_RDWR);
    snprintf(path, sizeof path, "%s/ep2", argv[1]);
    ep_out = open(path, O_RDWR);
    if (ep_in < 0 || ep_out < 0) { perror("endpoints"); return 69; }
    pthread_t a, b;
    pthread_create(&a, NULL, source, NULL);
    pthread_create(&b, NULL, sink, NULL);
    struct usb_functionfs_event events[4];
    for (;;) {
        ssize_t count = read(ep0, events, sizeof events);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) return 0;
        for (size_t i = 0; i < (size_t)count / sizeof events[0]; i++) {
            if (events[i].type == FUNCTIONFS_SETUP) {  /* no control requests: stall */
                if (events[i].u.setup.bRequestType & USB_DIR_IN) { if (write(ep0, NULL, 0) < 0) {} }
                else { if (read(ep0, NULL, 0) < 0) {} }
            }
        }
    }
}
