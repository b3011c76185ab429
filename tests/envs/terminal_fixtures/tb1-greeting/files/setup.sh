#!/bin/bash
mkdir -p "${APP_DIR:-/app}/extra"
echo made > "${APP_DIR:-/app}/extra/made.txt"
