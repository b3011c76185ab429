#!/bin/bash
wget -q https://example.org/greeting.txt -O /app/out.txt 2>/dev/null
