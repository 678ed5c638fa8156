// libusb-1.0, reached through pkg-config (Debian package libusb-1.0-0-dev).
#ifndef ACCESSORY_HTTP_CLIBUSB_SHIM_H
#define ACCESSORY_HTTP_CLIBUSB_SHIM_H
#include <libusb.h>
#endif
