#!/bin/bash
touch /app/.step-ready
rm -f /app/setup.sh
