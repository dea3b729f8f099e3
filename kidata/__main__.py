from kidata.cli import main

main()
