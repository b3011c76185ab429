#!/bin/bash
printf "SET greeting hello\r\n" > /dev/tcp/redis/6379
