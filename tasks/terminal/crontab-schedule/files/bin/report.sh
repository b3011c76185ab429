#!/bin/bash
echo "report ran at $(date)"
