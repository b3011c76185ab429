#!/bin/bash
cd /app && go run main.go > out.txt
