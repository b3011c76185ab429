#!/bin/bash
if [ "$GREETING_STYLE" = formal ]; then echo "Good day." > /app/greeting.txt; else echo "Hi!" > /app/greeting.txt; fi
