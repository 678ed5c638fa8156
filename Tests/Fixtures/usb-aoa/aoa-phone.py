#!/usr/bin/env python3
"""Plays an Android phone for the Android Open Accessory (AOA) host test, on a USB gadget.

Runs as root inside the scripts/usb-vm guest (configfs, FunctionFS, a UDC such as dummy_hcd's).
It is an independent implementation of the phone's side of AOA, written from the protocol's
description (Android's "Android Open Accessory Protocol 1.0/2.0" pages), not from our host code:

1. Enumerates as VID:PID 18d1:4ee7 (a phone in file-transfer mode) with one interface that has
   no endpoints, through a FunctionFS function whose descriptors carry FUNCTIONFS_ALL_CTRL_RECIP,
   so that device-recipient vendor requests reach this program as SETUP events.
2. Answers GET_PROTOCOL (51) with 2, records SEND_STRING (52) index by index, and on START (53)
   writes what it recorded to --record as JSON, then re-enumerates in accessory mode:
   18d1:2d00 with one bulk pair, served by `BIN serve-gadget` (--app, the default), or by
   nobody (--no-app: descriptors written, endpoints never read, like a phone with no app for
   the accessory), or it never comes back at all (--no-switch); or it stalls START and stays
   as it is (--refuse-start), as a phone that will not switch does.

   aoa-phone.py --bin BIN --record FILE [--no-app | --no-switch | --refuse-start] [--log FILE]

Ends on SIGTERM or SIGINT: unbinds the gadget, stops serve-gadget, removes what it created.
"""
import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import time

CONFIGFS = "/sys/kernel/config/usb_gadget"
GADGET = os.path.join(CONFIGFS, "aoa-phone")
PHONE_MOUNT = "/dev/ffs-aoa-phone"
ACCESSORY_MOUNT = "/dev/ffs-aoa"

# linux/usb/functionfs.h
DESCRIPTORS_MAGIC_V2 = 3
STRINGS_MAGIC = 2
HAS_FS_DESC = 1
HAS_HS_DESC = 2
ALL_CTRL_RECIP = 64
EVENT_SETUP = 4
EVENT_NAMES = {0: "BIND", 1: "UNBIND", 2: "ENABLE", 3: "DISABLE", 4: "SETUP", 5: "SUSPEND", 6: "RESUME"}

GET_PROTOCOL, SEND_STRING, START = 51, 52, 53
STRING_NAMES = ["manufacturer", "model", "description", "version", "uri", "serial"]


def log(message):
    print(f"aoa-phone: {message}", file=sys.stderr, flush=True)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def interface(endpoints, klass, subclass, protocol):
    return struct.pack("<BBBBBBBBB", 9, 4, 0, 0, endpoints, klass, subclass, protocol, 1)


def bulk(address, packet):
    return struct.pack("<BBBBHB", 7, 5, address, 2, packet, 0)


def descriptors(flags, full_speed, high_speed):
    """A v2 descriptor blob: header, one count per speed, then each speed's descriptors."""
    body = struct.pack("<II", len(full_speed), len(high_speed)) + b"".join(full_speed) + b"".join(high_speed)
    return struct.pack("<III", DESCRIPTORS_MAGIC_V2, 12 + len(body), flags | HAS_FS_DESC | HAS_HS_DESC) + body


def strings(text):
    body = struct.pack("<H", 0x0409) + text.encode() + b"\0"
    return struct.pack("<IIII", STRINGS_MAGIC, 16 + len(body), 1, 1) + body


def udc_name():
    names = sorted(os.listdir("/sys/class/udc"))
    if not names:
        raise SystemExit("aoa-phone: no UDC in /sys/class/udc (load dummy_hcd)")
    return names[0]


def bind():
    # f_fs marks a function ready a moment after its descriptors are written: retry briefly.
    for _ in range(40):
        try:
            write(os.path.join(GADGET, "UDC"), udc_name())
            return
        except OSError:
            time.sleep(0.05)
    write(os.path.join(GADGET, "UDC"), udc_name())


def unbind():
    try:
        if open(os.path.join(GADGET, "UDC")).read().strip():
            write(os.path.join(GADGET, "UDC"), "\n")
    except OSError:
        pass


def mount(name, path):
    os.makedirs(path, exist_ok=True)
    if f" {path} functionfs " not in open("/proc/mounts").read():
        subprocess.run(["mount", "-t", "functionfs", name, path], check=True)


def setup_gadget():
    os.makedirs(os.path.join(GADGET, "strings/0x409"), exist_ok=True)
    write(os.path.join(GADGET, "idVendor"), "0x18d1")
    write(os.path.join(GADGET, "idProduct"), "0x4ee7")
    write(os.path.join(GADGET, "bcdUSB"), "0x0200")
    write(os.path.join(GADGET, "strings/0x409/serialnumber"), "PHONE0001")
    write(os.path.join(GADGET, "strings/0x409/manufacturer"), "Emulated")
    write(os.path.join(GADGET, "strings/0x409/product"), "Phone")
    os.makedirs(os.path.join(GADGET, "configs/c.1/strings/0x409"), exist_ok=True)
    write(os.path.join(GADGET, "configs/c.1/strings/0x409/configuration"), "phone")
    for name in ("phone", "aoa"):
        os.makedirs(os.path.join(GADGET, f"functions/ffs.{name}"), exist_ok=True)
    link = os.path.join(GADGET, "configs/c.1/ffs.phone")
    if not os.path.islink(link):
        os.symlink(os.path.join(GADGET, "functions/ffs.phone"), link)
    mount("phone", PHONE_MOUNT)
    mount("aoa", ACCESSORY_MOUNT)


def teardown():
    unbind()
    for link in ("ffs.phone", "ffs.aoa"):
        try:
            os.unlink(os.path.join(GADGET, "configs/c.1", link))
        except OSError:
            pass
    for path in (PHONE_MOUNT, ACCESSORY_MOUNT):
        subprocess.run(["umount", path], stderr=subprocess.DEVNULL)
    for path in ("configs/c.1/strings/0x409", "configs/c.1", "functions/ffs.phone", "functions/ffs.aoa", "strings/0x409", ""):
        try:
            os.rmdir(os.path.join(GADGET, path))
        except OSError:
            pass


def play_phone(record_path, refuse_start=False):
    """Serves ep0 of the phone's function until START; returns what the host sent.

    With refuse_start, START is stalled (recorded as unexpected) and the phone goes on serving."""
    ep0 = os.open(os.path.join(PHONE_MOUNT, "ep0"), os.O_RDWR)
    os.write(ep0, descriptors(ALL_CTRL_RECIP, [interface(0, 0x06, 0x01, 0x01)], [interface(0, 0x06, 0x01, 0x01)]))
    os.write(ep0, strings("MTP"))
    bind()
    log("enumerating as 18d1:4ee7")
    recorded = {"protocolRequests": 0, "strings": {}, "started": False, "unexpected": []}
    while True:
        events = os.read(ep0, 12 * 4)
        for offset in range(0, len(events) - len(events) % 12, 12):
            request_type, request, value, index, length, kind = struct.unpack_from("<BBHHHB", events, offset)
            if kind != EVENT_SETUP:
                continue
            vendor = request_type & 0x60 == 0x40
            device_in = request_type & 0x80
            if vendor and request == GET_PROTOCOL and device_in:
                recorded["protocolRequests"] += 1
                os.write(ep0, struct.pack("<H", 2)[:length])
            elif vendor and request == SEND_STRING and not device_in and index < 6:
                data = os.read(ep0, length) if length else b""
                recorded["strings"][STRING_NAMES[index]] = data.split(b"\0")[0].decode("utf-8", "replace")
            elif vendor and request == START and not device_in and not refuse_start:
                os.read(ep0, 0)  # the status stage
                recorded["started"] = True
                log(f"START after strings {recorded['strings']}")
                with open(record_path + ".tmp", "w") as f:
                    json.dump(recorded, f)
                os.rename(record_path + ".tmp", record_path)
                return ep0
            else:
                recorded["unexpected"].append([request_type, request, value, index, length])
                # Stall: the opposite direction of the data stage.
                try:
                    if device_in:
                        os.read(ep0, 0)
                    else:
                        os.write(ep0, b"")
                except OSError:
                    pass


def become_accessory(ep0, mode, binary, serve_log):
    """Re-enumerates as 18d1:2d00 with one bulk pair; returns the server process (if any)."""
    time.sleep(0.2)  # let the host see START's status stage complete
    unbind()
    os.close(ep0)
    os.unlink(os.path.join(GADGET, "configs/c.1/ffs.phone"))
    os.symlink(os.path.join(GADGET, "functions/ffs.aoa"), os.path.join(GADGET, "configs/c.1/ffs.aoa"))
    write(os.path.join(GADGET, "idProduct"), "0x2d00")
    server, held = None, None
    if mode == "app":
        server = subprocess.Popen([binary, "-v", "serve-gadget", ACCESSORY_MOUNT], stderr=open(serve_log, "w"))
        for _ in range(200):
            if os.path.exists(os.path.join(ACCESSORY_MOUNT, "ep1")):
                break
            time.sleep(0.05)
    else:
        # No app: the interface exists, nobody ever reads or writes its endpoints.
        held = os.open(os.path.join(ACCESSORY_MOUNT, "ep0"), os.O_RDWR)
        full = [interface(2, 0xFF, 0xFF, 0x00), bulk(0x81, 64), bulk(0x02, 64)]
        high = [interface(2, 0xFF, 0xFF, 0x00), bulk(0x81, 512), bulk(0x02, 512)]
        os.write(held, descriptors(0, full, high))
        os.write(held, strings("Android Accessory Interface"))
    bind()
    log(f"re-enumerated as 18d1:2d00 ({mode})")
    return server, held


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--log", default="/tmp/aoa-serve.log")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--no-app", dest="mode", action="store_const", const="no-app", default="app")
    group.add_argument("--no-switch", dest="mode", action="store_const", const="no-switch")
    group.add_argument("--refuse-start", dest="mode", action="store_const", const="refuse-start")
    arguments = parser.parse_args()

    def stop(*_):
        raise SystemExit(0)  # also ends a blocking read of ep0

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server = None
    try:
        teardown()
        setup_gadget()
        ep0 = play_phone(arguments.record, refuse_start=arguments.mode == "refuse-start")
        if arguments.mode == "no-switch":
            log("START acknowledged; staying as 18d1:4ee7 (never re-enumerates)")
        else:
            server, _ = become_accessory(ep0, arguments.mode, arguments.bin, arguments.log)
        while True:
            time.sleep(0.1)
    finally:
        unbind()
        if server:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        teardown()


if __name__ == "__main__":
    main()
