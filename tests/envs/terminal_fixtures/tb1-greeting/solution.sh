#!/bin/bash
echo "hello, world" > "${APP_DIR:-/app}/greeting.txt"
